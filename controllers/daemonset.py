"""daemonset: one pod of each DaemonSet on every node that should run it, placed by the scheduler.

Upstream: pkg/controller/daemon/daemon_controller.go, update.go and util/daemonset_util.go.

* **Eligibility** (NodeShouldRunDaemonPod): the pod the DaemonSet would make for the node — its
  template plus the tolerations every daemon pod gets (AddOrUpdateDaemonPodTolerations:
  not-ready and unreachable NoExecute without seconds; disk-, memory-, pid-pressure and
  unschedulable NoSchedule; network-unavailable NoSchedule for hostNetwork pods) — must match
  the node's name (template nodeName), its labels (nodeSelector and required node affinity) and
  tolerate its NoSchedule/NoExecute taints. A node whose taints stop it only by NoSchedule keeps
  the pods it has (shouldContinueRunning). A cordoned node is eligible: its unschedulable taint
  is tolerated.
* **Pods** are created with the DaemonSet as controlling owner and a required node affinity
  `matchFields metadata.name In [node]` that replaces any required terms of the template
  (ReplaceDaemonSetPodNodeNameNodeAffinity), and left to the scheduler to bind. Per node
  (podsShouldBeOnNode): none where one should run -> create; Failed or Succeeded -> delete (the
  next sync creates a new one); more than one running -> delete all but the oldest; a node that
  should not keep them -> delete them all. Creations go out in slow-start batches (1, 2, 4, ...)
  as upstream's syncNodes; expectations stop a sync from creating again before the informer has
  seen the pods it created.
* **RollingUpdate** (maxSurge 0): pods carry the `controller-revision-hash` label, here a hash
  of the pod template. Old pods that are not available are replaced at once; available ones
  only while fewer than maxUnavailable (of desiredNumberScheduled, rounded up) pods are
  unavailable (update.go rollingUpdate). kse keeps no ControllerRevision objects: the hash is of
  the current template only, so a rollback is a rollout to the old template. OnDelete: old pods
  are replaced only when someone deletes them. maxSurge > 0 is treated as 0.
* **Status** (updateDaemonSetStatus): desiredNumberScheduled, currentNumberScheduled,
  numberMisscheduled, numberReady, numberAvailable, updatedNumberScheduled, numberUnavailable,
  observedGeneration, written through daemonsets/status when it changed.

Syncs run on `--concurrent-daemonset-syncs` workers (2) over client-go's rate-limited queue, a
DaemonSet never on two at once. Not modelled: adoption of orphaned pods, the failed-pod backoff,
and ControllerRevision history.
Every write carries the term's fence.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.eventsink import NORMAL, WARNING, record
from controllers.podutil import POD_FAILED, POD_SUCCEEDED, controller_of, is_pod_available, is_pod_ready
from controllers.worker import run_workers
from controllers.workqueue import RateLimitingQueue
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from kse.objects.intstr import IntOrStringError, int_or_string, scaled_value
from kse.objects.labels import RequiredNodeAffinity, SelectorError, label_selector_as_selector
from kse.objects.meta import object_key
from kse.objects.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
    add_or_update_toleration,
    untolerated,
)
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

REVISION_HASH_LABEL = "controller-revision-hash"
COMPONENT = "daemonset-controller"  # upstream's event source
OBJECT_NAME_FIELD = "metadata.name"
EXPECTATIONS_TIMEOUT_S = 300.0  # ExpectationsTimeout (5 min), as upstream's ControllerExpectations
SLOW_START_INITIAL_BATCH = 1


def daemon_tolerations(spec: pb.PodSpec) -> None:
    """AddOrUpdateDaemonPodTolerations."""
    rows = [
        (TAINT_NODE_NOT_READY, NO_EXECUTE),
        (TAINT_NODE_UNREACHABLE, NO_EXECUTE),
        (TAINT_NODE_DISK_PRESSURE, NO_SCHEDULE),
        (TAINT_NODE_MEMORY_PRESSURE, NO_SCHEDULE),
        (TAINT_NODE_PID_PRESSURE, NO_SCHEDULE),
        (TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE),
    ]
    if spec.host_network:
        rows.append((TAINT_NODE_NETWORK_UNAVAILABLE, NO_SCHEDULE))
    for key, effect in rows:
        add_or_update_toleration(spec, pb.Toleration(key=key, operator="Exists", effect=effect))


def replace_node_name_affinity(spec: pb.PodSpec, node_name: str) -> None:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes the one term
    `metadata.name In [node_name]` (preferred terms and pod (anti-)affinity are kept)."""
    required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    del required.node_selector_terms[:]
    term = required.node_selector_terms.add()
    term.match_fields.add(key=OBJECT_NAME_FIELD, operator="In", values=[node_name])


def template_hash(template: pb.PodTemplateSpec) -> str:
    """The `controller-revision-hash` of a template (upstream hashes the ControllerRevision)."""
    digest = hashlib.sha256(template.SerializeToString(deterministic=True)).hexdigest()
    return digest[:10]


def new_pod(ds: pb.DaemonSet, node_name: str) -> pb.Pod:
    """NewPod: the template with the daemon tolerations, for the predicates (no node affinity yet)."""
    pod = pb.Pod(metadata=pb.ObjectMeta(namespace=ds.metadata.namespace))
    pod.metadata.labels.update(ds.spec.template.metadata.labels)
    pod.spec.CopyFrom(ds.spec.template.spec)
    pod.spec.node_name = node_name
    daemon_tolerations(pod.spec)
    return pod


def node_should_run_daemon_pod(node: pb.Node, ds: pb.DaemonSet) -> tuple[bool, bool]:
    """NodeShouldRunDaemonPod: (should run, should continue running)."""
    name = node.metadata.name
    template_node = ds.spec.template.spec.node_name
    if template_node and template_node != name:
        return False, False
    pod = new_pod(ds, name)
    spec = pod.spec
    affinity = spec.affinity if spec.HasField("affinity") else None
    try:
        fits_affinity = RequiredNodeAffinity(spec.node_selector, affinity).matches(node)
    except SelectorError:
        return False, False
    if not fits_affinity:
        return False, False
    taints = list(node.spec.taints)
    if untolerated(taints, spec.tolerations, (NO_SCHEDULE, NO_EXECUTE)) is not None:
        return False, untolerated(taints, spec.tolerations, (NO_EXECUTE,)) is None
    return True, True


def target_node_name(pod: pb.Pod) -> str:
    """util.GetTargetNodeName: the node a daemon pod is bound to, or meant for (its node affinity)."""
    if pod.spec.node_name:
        return pod.spec.node_name
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    for term in required.node_selector_terms:
        for req in term.match_fields:
            if req.key == OBJECT_NAME_FIELD and req.operator == "In" and len(req.values) == 1:
                return req.values[0]
    return ""


def _oldest_first(pods: Iterable[pb.Pod]) -> list[pb.Pod]:
    return sorted(pods, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


@dataclass
class Plan:
    """One sync's decisions: nodes that need a pod, pods to delete, and the status to report."""

    create_on: list[str] = field(default_factory=list)
    delete: list[pb.Pod] = field(default_factory=list)
    status: pb.DaemonSetStatus = field(default_factory=pb.DaemonSetStatus)


def max_unavailable(ds: pb.DaemonSet, desired: int) -> int:
    """updatedDesiredNodeCounts's maxUnavailable (surge treated as 0): at least 1."""
    ru = ds.spec.update_strategy.rolling_update
    value: int | str | None = 1
    if ru.HasField("max_unavailable"):
        try:
            value = int_or_string(ru.max_unavailable)
        except IntOrStringError:
            value = 1
    n = scaled_value(value if value is not None else 1, desired, round_up=True)
    return max(1, n)


def plan_sync(
    ds: pb.DaemonSet, nodes: Iterable[pb.Node], pods_by_node: dict[str, list[pb.Pod]], now: float
) -> Plan:
    """manage + rollingUpdate + updateDaemonSetStatus over the nodes and the DaemonSet's pods by
    target node (pods with a deletionTimestamp included: they count as scheduled, never act)."""
    plan = Plan()
    h = template_hash(ds.spec.template)
    min_ready = ds.spec.min_ready_seconds
    st = plan.status
    st.observed_generation = ds.metadata.generation
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        name = node.metadata.name
        pods = pods_by_node.get(name, [])
        should_run, should_continue = node_should_run_daemon_pod(node, ds)
        live = [p for p in pods if not p.metadata.deletion_timestamp]
        # manage (podsShouldBeOnNode)
        if should_run and not pods:
            plan.create_on.append(name)
        elif should_continue:
            running = []
            for p in live:
                if p.status.phase in (POD_FAILED, POD_SUCCEEDED):
                    plan.delete.append(p)
                else:
                    running.append(p)
            for extra in _oldest_first(running)[1:]:
                plan.delete.append(extra)
        elif pods:
            plan.delete.extend(live)
        # status
        if should_run:
            st.desired_number_scheduled += 1
            if pods:
                st.current_number_scheduled += 1
                first = _oldest_first(pods)[0]
                if is_pod_ready(first):
                    st.number_ready += 1
                    if is_pod_available(first, min_ready, now):
                        st.number_available += 1
                if first.metadata.labels.get(REVISION_HASH_LABEL) == h:
                    st.updated_number_scheduled += 1
        elif pods:
            st.number_misscheduled += 1
    st.number_unavailable = st.desired_number_scheduled - st.number_available
    deleting = {p.metadata.uid for p in plan.delete}
    if ds.spec.update_strategy.type == "RollingUpdate":
        budget = max_unavailable(ds, st.desired_number_scheduled)
        for p in rolling_update_deletions(pods_by_node, h, budget, min_ready, now):
            if p.metadata.uid not in deleting:
                plan.delete.append(p)
    return plan


def rolling_update_deletions(
    pods_by_node: dict[str, list[pb.Pod]], h: str, budget: int, min_ready: int, now: float
) -> list[pb.Pod]:
    """update.go rollingUpdate with maxSurge 0: the old pods to delete now."""
    unavailable = 0
    replace_now: list[pb.Pod] = []
    candidates: list[pb.Pod] = []
    for name in sorted(pods_by_node):
        live = [p for p in pods_by_node[name] if not p.metadata.deletion_timestamp]
        new = [p for p in live if p.metadata.labels.get(REVISION_HASH_LABEL) == h]
        old = [p for p in live if p.metadata.labels.get(REVISION_HASH_LABEL) != h]
        if len(new) > 1 or len(old) > 1 or (new and old) or (not new and not old):
            unavailable += 1  # the manage step sorts this node out
        elif new:
            if not is_pod_available(new[0], min_ready, now):
                unavailable += 1
        elif not is_pod_available(old[0], min_ready, now):
            replace_now.append(old[0])
        elif unavailable < budget:
            candidates.append(old[0])
    remaining = min(max(0, budget - unavailable), len(candidates))
    return replace_now + candidates[:remaining]


@dataclass
class Expectations:
    """ControllerExpectations for one DaemonSet: creations and deletions not yet observed."""

    creates: set[str] = field(default_factory=set)  # node names
    deletes: set[str] = field(default_factory=set)  # pod uids
    at: float = 0.0

    def satisfied(self, now: float) -> bool:
        return (not self.creates and not self.deletes) or now - self.at > EXPECTATIONS_TIMEOUT_S


class DaemonSetController:
    """See the module doc."""

    name: ClassVar[str] = "daemonset"

    def __init__(self, ctx: ControllerContext, *, clock: Callable[[], float] = time.time) -> None:
        self.ctx = ctx
        self.cs = ctx.clientset
        self._clock = clock
        self.daemonsets = ctx.informers.informer_for(ctx.clientset.daemon_sets)
        self.pods = ctx.informers.informer_for(ctx.clientset.pods)
        self.nodes = ctx.informers.informer_for(ctx.clientset.nodes)
        self.expectations: dict[str, Expectations] = {}
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(self.name, metrics=ctx.workqueue_metrics)
        self.daemonsets.add_event_handler(
            lambda d: self._enqueue(self._key(d)),
            lambda o, n: self._enqueue(self._key(n)),
            lambda d: self.expectations.pop(self._key(d), None),
        )
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(
            lambda n: self._enqueue_all(),
            lambda o, n: self._node_updated(o, n),
            lambda n: self._enqueue_all(),
        )

    @staticmethod
    def _key(ds: pb.DaemonSet) -> str:
        return object_key(ds.metadata.namespace, ds.metadata.name)

    def _enqueue(self, key: str) -> None:
        self.queue.add(key)

    def _enqueue_all(self) -> None:
        for key in self.daemonsets.store.keys():
            self._enqueue(key)

    def _node_updated(self, old: pb.Node, new: pb.Node) -> None:
        """shouldIgnoreNodeUpdate: only labels, taints and unschedulable matter to eligibility."""
        if (old.metadata.labels, old.spec.taints, old.spec.unschedulable) != (
            new.metadata.labels,
            new.spec.taints,
            new.spec.unschedulable,
        ):
            self._enqueue_all()

    def _owner_key(self, pod: pb.Pod) -> str | None:
        ref = controller_of(pod.metadata)
        if ref is None or ref.kind != "DaemonSet":
            return None
        key = object_key(pod.metadata.namespace, ref.name)
        ds = self.daemonsets.store.get(key)
        return key if ds is not None and ds.metadata.uid == ref.uid else None

    def _pod_added(self, pod: pb.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            exp = self.expectations.get(key)
            if exp is not None:
                exp.creates.discard(target_node_name(pod))
            self._enqueue(key)

    def _pod_updated(self, old: pb.Pod, new: pb.Pod) -> None:
        key = self._owner_key(new)
        if key is not None:
            self._enqueue(key)

    def _pod_deleted(self, pod: pb.Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            exp = self.expectations.get(key)
            if exp is not None:
                exp.deletes.discard(pod.metadata.uid)
            self._enqueue(key)

    # -- the loop

    async def run(self) -> None:
        """--concurrent-daemonset-syncs workers (2) over the rate-limited queue; a failed sync is
        retried with backoff, a fenced one ends the term (controllers/worker.py)."""
        self._enqueue_all()
        await run_workers(self.name, self.queue, self.sync, self.ctx.options.syncs_for(self.name), self.ctx)

    def pods_by_node(self, ds: pb.DaemonSet) -> dict[str, list[pb.Pod]]:
        """getNodesToDaemonPods: its pods (controllerRef by uid, selector match) by target node."""
        try:
            selector = label_selector_as_selector(ds.spec.selector)
        except SelectorError:
            return {}
        out: dict[str, list[pb.Pod]] = {}
        for pod in self.pods.store.list():
            if pod.metadata.namespace != ds.metadata.namespace:
                continue
            ref = controller_of(pod.metadata)
            if ref is None or ref.uid != ds.metadata.uid or not selector.matches(pod.metadata.labels):
                continue
            out.setdefault(target_node_name(pod), []).append(pod)
        return out

    async def sync(self, key: str) -> None:
        ds = self.daemonsets.store.get(key)
        if ds is None or ds.metadata.deletion_timestamp:
            return
        now = self._clock()
        plan = plan_sync(ds, self.nodes.store.list(), self.pods_by_node(ds), now)
        exp = self.expectations.setdefault(key, Expectations())
        if exp.satisfied(now):
            exp.creates.clear()
            exp.deletes.clear()
            await self._sync_nodes(ds, exp, plan, now)
        await self._update_status(ds, plan.status)

    async def _sync_nodes(self, ds: pb.DaemonSet, exp: Expectations, plan: Plan, now: float) -> None:
        if not plan.create_on and not plan.delete:
            return
        exp.at = now
        exp.creates.update(plan.create_on)
        exp.deletes.update(p.metadata.uid for p in plan.delete)
        h = template_hash(ds.spec.template)
        pending = list(plan.create_on)
        batch = SLOW_START_INITIAL_BATCH
        while pending:
            chunk, pending = pending[:batch], pending[batch:]
            results = await asyncio.gather(*(self._create(ds, n, h) for n in chunk), return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            for node, r in zip(chunk, results, strict=True):
                if isinstance(r, BaseException):
                    exp.creates.discard(node)
            if failed:
                for n in pending:
                    exp.creates.discard(n)
                for r in failed:
                    if isinstance(r, FencedError):
                        raise r
                if not isinstance(failed[0], ApiError):
                    raise failed[0]
                log.info("daemonset %s: creating pods failed: %s", self._key(ds), failed[0])
                break
            batch *= 2
        for pod in plan.delete:
            try:
                await self.cs.pods.delete(
                    pod.metadata.namespace, pod.metadata.name, uid=pod.metadata.uid, fence=self.ctx.fence()
                )
                record(
                    self.ctx,
                    ds,
                    NORMAL,
                    "SuccessfulDelete",
                    f"Deleted pod: {pod.metadata.name}",
                    component=COMPONENT,
                )
            except (NotFoundError, ConflictError):
                exp.deletes.discard(pod.metadata.uid)  # gone already, or another pod by now
            except ApiError:
                exp.deletes.discard(pod.metadata.uid)  # not deleted: no deletion to wait for
                raise

    async def _create(self, ds: pb.DaemonSet, node_name: str, h: str) -> None:
        tmpl = ds.spec.template
        pod = pb.Pod(
            metadata=pb.ObjectMeta(generate_name=f"{ds.metadata.name}-", namespace=ds.metadata.namespace),
        )
        pod.metadata.labels.update(tmpl.metadata.labels)
        pod.metadata.labels[REVISION_HASH_LABEL] = h
        pod.metadata.annotations.update(tmpl.metadata.annotations)
        pod.metadata.owner_references.append(
            pb.OwnerReference(
                api_version="apps/v1",
                kind="DaemonSet",
                name=ds.metadata.name,
                uid=ds.metadata.uid,
                controller=True,
                block_owner_deletion=True,
            )
        )
        pod.spec.CopyFrom(tmpl.spec)
        daemon_tolerations(pod.spec)
        replace_node_name_affinity(pod.spec, node_name)
        try:
            created = await self.cs.pods.create(pod, fence=self.ctx.fence())
        except ApiError as e:
            record(self.ctx, ds, WARNING, "FailedCreate", f"Error creating: {e.message}", component=COMPONENT)
            raise
        record(
            self.ctx,
            ds,
            NORMAL,
            "SuccessfulCreate",
            f"Created pod: {created.metadata.name}",
            component=COMPONENT,
        )

    async def _update_status(self, ds: pb.DaemonSet, status: pb.DaemonSetStatus) -> None:
        want = pb.DaemonSetStatus()
        want.CopyFrom(status)
        want.conditions.extend(ds.status.conditions)
        if ds.status.HasField("collision_count"):
            want.collision_count = ds.status.collision_count
        if want == ds.status:
            return
        update = pb.DaemonSet(
            metadata=pb.ObjectMeta(
                name=ds.metadata.name,
                namespace=ds.metadata.namespace,
                resource_version=ds.metadata.resource_version,
            ),
            status=want,
        )
        try:
            await self.cs.daemon_sets.update_status(update, fence=self.ctx.fence())
        except ConflictError:
            self._enqueue(self._key(ds))  # the informer brings the newer object
        except NotFoundError:
            pass
