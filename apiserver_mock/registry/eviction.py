"""pods/eviction: a pod delete that honours its PodDisruptionBudget, as upstream's EvictionREST
(pkg/registry/core/pod/storage/eviction.go).

The decision, in upstream's order:

1. A pod that is terminal (Succeeded / Failed), Pending, or already terminating disrupts nothing
   more: it is deleted without looking at budgets (`canIgnorePDB`); a Pending one with its
   resourceVersion as precondition, so it cannot become Ready (and count) in between.
2. The budgets in the pod's namespace whose selector matches it: more than one is an internal
   error (upstream's message); none: the pod is deleted.
3. One budget, pod not Ready: deleted without touching the budget if the budget's
   `unhealthyPodEvictionPolicy` is AlwaysAllow, or (IfHealthyBudget, the default) the budget is
   healthy (currentHealthy >= desiredHealthy > 0); again with the pod's resourceVersion pinned.
4. Otherwise `checkAndDecrement`: a budget the controller has not processed yet (observedGeneration
   behind generation) or with no disruptions allowed gets 429 TooManyRequests with upstream's
   message and `DisruptionBudget` cause; else disruptionsAllowed goes down by one and the pod is
   recorded in `status.disruptedPods`.

Where upstream writes the budget's status and then deletes the pod in two requests (a pod delete
that then fails leaves the budget decremented for nothing until the controller's 2-minute
expiry), here both go into ONE etcd transaction (`Store.write_all`): the budget compared on its
mod_revision, the pod on its own. Both land or neither does. A failed transaction returns the
current budget and pod; the decision is re-made on them at once (upstream's RetryOnConflict on
the budget, without its 500 ms sleeps: the failure branch already carries the fresh copy), at most
`EVICTION_ATTEMPTS` times. That is what makes N concurrent evictions against a budget of k admit
exactly k: each admitted one moved the budget's revision, so every other one re-decides on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apiserver_mock import errors, wire
from apiserver_mock.errors import APIError, FencedOff, Forbidden, Invalid, TooManyRequests
from apiserver_mock.fencing import Guard, violated
from apiserver_mock.registry.generic import Current, parse_rv, precondition_failure
from apiserver_mock.registry.graceful import plan_pod_deletion
from apiserver_mock.storage import KeyWrite
from certs.identity import Identity
from kse.objects.disruption import (
    ALWAYS_ALLOW,
    DISRUPTION_BUDGET_CAUSE,
    DISRUPTION_TARGET,
    EVICTION_BY_EVICTION_API,
    is_pod_ready,
    matching_pdbs,
    pdb_matches,
    update_disruption_allowed_condition,
)
from kse.objects.kinds import BY_FIELD
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from apiserver_mock.auth.authz import ObjectCheck
    from apiserver_mock.registry.generic import Registry

POD = BY_FIELD["pod"]
PDB = BY_FIELD["pod_disruption_budget"]
# upstream EvictionsRetry has 20 steps; each failed attempt here means another eviction landed.
EVICTION_ATTEMPTS = 20
# eviction.go MaxDisruptedPodSize: evictions the controller has not yet confirmed, at most.
MAX_DISRUPTED_POD_SIZE = 2000
BUDGET_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE_PDB = (
    "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction "
    "subresource does not support."
)


def _too_many_requests(cause: str, retry_after: int) -> TooManyRequests:
    return TooManyRequests(
        BUDGET_VIOLATION, causes=((DISRUPTION_BUDGET_CAUSE, cause),), retry_after=retry_after
    )


def _forbidden(pdb: pb.PodDisruptionBudget, why: str) -> Forbidden:
    return Forbidden(f'poddisruptionbudget.policy "{pdb.metadata.name}" is forbidden: {why}')


def check_and_decrement(pdb: pb.PodDisruptionBudget, pod_name: str, now: str) -> pb.PodDisruptionBudget:
    """The budget after admitting one more disruption of `pod_name`, or the error that refuses it
    (upstream checkAndDecrement). `pdb` is not modified."""
    st = pdb.status
    if st.observed_generation < pdb.metadata.generation:
        raise _too_many_requests(
            f"The disruption budget {pdb.metadata.name} is still being processed by the server.", 10
        )
    if st.disruptions_allowed < 0:
        raise _forbidden(pdb, "pdb disruptions allowed is negative")
    if len(st.disrupted_pods) > MAX_DISRUPTED_POD_SIZE:
        raise _forbidden(
            pdb, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if st.disruptions_allowed == 0:
        raise _too_many_requests(
            f"The disruption budget {pdb.metadata.name} needs {st.desired_healthy} healthy pods "
            f"and has {st.current_healthy} currently",
            0,
        )
    out = pb.PodDisruptionBudget()
    out.CopyFrom(pdb)
    out.status.disruptions_allowed -= 1
    if out.status.disruptions_allowed == 0:
        update_disruption_allowed_condition(out.status, now)
    out.status.disrupted_pods[pod_name] = now
    out.metadata.resource_version = ""
    return out


def _can_ignore_pdb(pod: pb.Pod) -> bool:
    """canIgnorePDB: terminal, Pending or terminating pods are evicted without a budget check."""
    return pod.status.phase in ("Succeeded", "Failed", "Pending") or bool(pod.metadata.deletion_timestamp)


def _unhealthy_may_go(pod: pb.Pod, pdb: pb.PodDisruptionBudget) -> bool:
    """A pod that is not Ready does not count as healthy: with AlwaysAllow it may always go; with
    IfHealthyBudget (the default) while the budget is met."""
    if is_pod_ready(pod):
        return False
    if pdb.spec.unhealthy_pod_eviction_policy == ALWAYS_ALLOW:
        return True
    st = pdb.status
    return st.current_healthy >= st.desired_healthy and st.desired_healthy > 0


def _with_disruption_target(pod: pb.Pod, now: str) -> None:
    """addConditionAndDeletePod: the DisruptionTarget condition says why the pod is going."""
    for c in pod.status.conditions:
        if c.type == DISRUPTION_TARGET:
            c.status, c.reason, c.message = "True", EVICTION_BY_EVICTION_API, "Eviction API: evicting"
            c.last_transition_time = now
            return
    pod.status.conditions.add(
        type=DISRUPTION_TARGET,
        status="True",
        reason=EVICTION_BY_EVICTION_API,
        message="Eviction API: evicting",
        last_transition_time=now,
    )


class _Eviction:
    """One eviction request, across its attempts."""

    def __init__(
        self, reg: Registry, req: pb.EvictRequest, ns: str, check: ObjectCheck | None, guard: Guard
    ) -> None:
        self.reg = reg
        self.req = req
        self.ns = ns
        self.check = check
        self.guard = guard
        self.grace = req.grace_period_seconds if req.HasField("grace_period_seconds") else None
        self.want_rv = parse_rv(req.resource_version) if req.resource_version else None
        self.pod_key = reg.cache(POD).key(ns, req.name)

    async def run(self, notes: dict[str, object] | None) -> tuple[bytes, int]:
        reg = self.reg
        base = await reg._base(POD, self.pod_key, self.want_rv)
        pdb_base: Current | None = None
        for _ in range(EVICTION_ATTEMPTS):
            if base is None:
                raise errors.not_found(POD, self.req.name)
            pod: pb.Pod = base.msg  # type: ignore[assignment]
            failed = precondition_failure(pod.metadata.uid, base.revision, self.req.uid, self.want_rv)
            if failed:
                raise errors.conflict(POD, self.req.name, failed)
            if self.check is not None:
                self.check.check(pod)
            # Every write below compares the pod's revision, so a pod that changed meanwhile (a
            # Pending one turning Ready) is decided again (upstream pins the resourceVersion).
            pdb: pb.PodDisruptionBudget | None = None
            if not _can_ignore_pdb(pod):
                if pdb_base is None or not pdb_matches(pdb_base.msg, pod):  # type: ignore[arg-type]
                    pdb_base = await self._pdb_for(pod)
                if pdb_base is not None:
                    pdb = pdb_base.msg  # type: ignore[assignment]
                    if _unhealthy_may_go(pod, pdb):  # type: ignore[arg-type]
                        pdb = None
            now = now_rfc3339()
            writes: list[KeyWrite] = []
            if pdb is not None and pdb_base is not None:
                new_pdb = check_and_decrement(pdb, pod.metadata.name, now)
                pdb_key = reg.cache(PDB).key(self.ns, pdb.metadata.name)
                writes.append(KeyWrite(pdb_key, new_pdb.SerializeToString(), pdb_base.revision))
            plan = plan_pod_deletion(pod, self.grace)
            if plan.pending:  # already terminating with a shorter period: nothing to change
                return wire.object_wire(POD, base.value, base.revision), base.revision
            pod_value: bytes | None = None
            if plan.pod is not None:
                _with_disruption_target(plan.pod, now)
                pod_value = plan.pod.SerializeToString()
            writes.append(KeyWrite(self.pod_key, pod_value, base.revision))
            if self.req.dry_run:
                return wire.object_wire(POD, pod_value or base.value, base.revision), base.revision
            res = await reg.store.write_all(writes, self.guard)
            if res.succeeded:
                if notes is not None and pdb is not None:
                    notes["pdb"] = pdb.metadata.name
                return wire.object_wire(POD, pod_value or base.value, res.revision), res.revision
            if self.guard.keys:
                why = violated(self.guard, res.guard_values)
                if why:
                    raise FencedOff(why)
            self.guard = res.guard
            *pdb_kv, pod_kv = res.currents
            base = reg._from(POD, pod_kv)
            if pdb_kv:
                # The budget as it is now (gone: looked up again on the next attempt).
                pdb_base = reg._from(PDB, pdb_kv[0])
        raise errors.conflict(POD, self.req.name, errors.MODIFIED)

    async def _pdb_for(self, pod: pb.Pod) -> Current | None:
        """The one budget covering `pod` (found in the watch cache; the transaction's compare
        catches a stale copy), None if none; more than one is upstream's internal error."""
        cache = self.reg.cache(PDB)
        pdbs = [o.message for o in cache.objects.values() if o.namespace == self.ns]
        found = matching_pdbs(pdbs, pod)  # type: ignore[arg-type]
        if len(found) > 1:
            raise APIError(MORE_THAN_ONE_PDB)
        if not found:
            return None
        return await self.reg._base(PDB, cache.key(self.ns, found[0].metadata.name))


async def evict(
    reg: Registry, ident: Identity, req: pb.EvictRequest, notes: dict[str, object] | None = None
) -> tuple[bytes, int]:
    """The Evict verb: authorize (create pods/eviction), fence, then decide as the module doc says.
    `notes` (when given) receives the name of the budget decremented, for the audit record."""
    ns = reg.namespace_for(POD, req.namespace)
    check = reg.authz.authorize(ident, "create", POD, "eviction", ns, req.name)
    if not req.name:
        raise Invalid("name is required")
    guard = await reg.guard(ident, req.fence, POD, "eviction", req.name)
    return await _Eviction(reg, req, ns, check, guard).run(notes)
