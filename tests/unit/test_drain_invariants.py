"""The drain invariants on hand-made histories: each passes on a safe drain and fails on the
property broken on purpose (a second eviction past the budget, a bind into a cordoned node, a
replacement never made, a Deployment left short)."""

from __future__ import annotations

from chaos.checker.drain_invariants import (
    CORDON,
    UNCORDON,
    deployments_restored,
    desired_healthy,
    evictions_within_budget,
    no_bind_to_cordoned,
    no_pdb_violation,
    replacements_bound_once,
)
from chaos.podtimeline import PodStateRecord
from kse.audit import AuditRecord
from kse.objects.intstr import set_int_or_string
from proto import kse_pb2 as pb

LABELS = {"app": "web"}
RS = "ReplicaSet/web-7d9f"


def pdb(
    min_available: int | str | None = None, max_unavailable: int | str | None = None
) -> pb.PodDisruptionBudget:
    out = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="web", namespace="default"))
    out.spec.selector.match_labels.update(LABELS)
    if min_available is not None:
        set_int_or_string(out.spec.min_available, min_available)
    if max_unavailable is not None:
        set_int_or_string(out.spec.max_unavailable, max_unavailable)
    return out


class Run:
    """A tiny history: pods as a timeline, and the audit records that made them."""

    def __init__(self) -> None:
        self.rev = 0
        self.states: list[PodStateRecord] = []
        self.audit: list[AuditRecord] = []

    def state(
        self,
        name: str,
        *,
        ready: bool = True,
        terminating: bool = False,
        deleted: bool = False,
        node: str = "n1",
        owner: str = RS,
    ) -> int:
        self.rev += 1
        self.states.append(
            PodStateRecord(
                ts=float(self.rev),
                resource_version=self.rev,
                key=f"default/{name}",
                uid=f"uid-{name}",
                node=node,
                phase="Running",
                ready=ready,
                terminating=terminating,
                deleted=deleted,
                owner=owner,
                labels=dict(LABELS),
            )
        )
        return self.rev

    def evict(self, name: str) -> None:
        rev = self.state(name, terminating=True)
        self.audit.append(
            AuditRecord(
                ts=float(rev),
                user="admin",
                verb="evict",
                resource="pods",
                namespace="default",
                name=name,
                code="OK",
                subresource="eviction",
                revision=rev,
                uid=f"uid-{name}",
            )
        )

    def bind(self, name: str, node: str) -> int:
        self.rev += 1
        self.audit.append(
            AuditRecord(
                ts=float(self.rev),
                user="scheduler",
                verb="bind",
                resource="pods",
                namespace="default",
                name=name,
                code="OK",
                subresource="binding",
                revision=self.rev,
                node=node,
                uid=f"uid-{name}",
            )
        )
        return self.rev


def three_ready() -> Run:
    run = Run()
    for name in ("a", "b", "c"):
        run.state(name)
    return run


def test_desired_healthy_rounds_percentages_up_as_upstream():
    assert desired_healthy(pdb(min_available=2), 3) == 2
    assert desired_healthy(pdb(min_available="50%"), 3) == 2
    assert desired_healthy(pdb(max_unavailable=1), 3) == 2
    assert desired_healthy(pdb(max_unavailable="50%"), 3) == 1  # ceil(1.5) unavailable -> 1 healthy


def test_one_eviction_at_a_time_passes():
    run = three_ready()
    run.evict("a")
    run.state("a", terminating=True, deleted=True)
    run.state("a2")  # the replacement is ready before the next eviction
    run.bind("a2", "n2")
    run.evict("b")
    budgets = [pdb(min_available=2)]
    assert no_pdb_violation(run.states, budgets, run.audit).passed
    assert evictions_within_budget(run.states, budgets, run.audit).passed


def test_a_second_eviction_past_the_budget_is_caught_by_both_checks():
    run = three_ready()
    run.evict("a")
    run.evict("b")  # with minAvailable 2, b had to wait for a's replacement
    budgets = [pdb(min_available=2)]
    v = no_pdb_violation(run.states, budgets, run.audit)
    assert not v.passed and v.violations[0]["pod"] == "default/b" and v.violations[0]["available"] == 1
    e = evictions_within_budget(run.states, budgets, run.audit)
    assert not e.passed and [x["pod"] for x in e.violations] == ["default/b"]


def test_an_involuntary_drop_is_not_a_violation():
    run = three_ready()
    run.state("a", ready=False)  # its node went NotReady: not the budget's business
    run.state("b", ready=False)
    result = no_pdb_violation(run.states, [pdb(min_available=2)], run.audit)
    assert result.passed and result.counts["involuntary"] == 1  # only b took it below 2


def test_replacements_bound_once():
    run = three_ready()
    run.evict("a")
    run.state("a2")
    run.bind("a2", "n2")
    assert replacements_bound_once(run.states, run.audit).passed
    run.bind("a2", "n3")
    result = replacements_bound_once(run.states, run.audit)
    assert not result.passed and result.violations[0]["kind"] == "replacement-bound-twice"


def test_an_evicted_pod_never_replaced_is_caught():
    run = three_ready()
    run.evict("a")
    result = replacements_bound_once(run.states, run.audit)
    assert not result.passed and result.violations == [
        {"kind": "not-replaced", "owner": RS, "evicted": 1, "bound": 0}
    ]


def test_no_bind_to_cordoned_ignores_daemonset_pods_and_the_uncordoned_time():
    run = Run()
    run.state("web-1")
    run.state("agent-1", owner="DaemonSet/agent")
    cordon = run.bind("before", "n1")  # bound before the cordon: fine
    cordons = [("n1", CORDON, cordon + 1)]
    run.rev += 1
    run.bind("agent-1", "n1")  # a DaemonSet pod tolerates unschedulable
    uncordon = run.rev + 5
    cordons.append(("n1", UNCORDON, uncordon))
    run.rev = uncordon
    run.bind("after", "n1")
    assert no_bind_to_cordoned(run.states, run.audit, cordons).passed
    run.rev = cordon + 2
    run.bind("web-1", "n1")  # the broken case: an ordinary pod into the cordoned node
    result = no_bind_to_cordoned(run.states, run.audit, cordons)
    assert not result.passed and result.violations[0]["pod"] == "default/web-1"


def test_deployments_restored():
    d = pb.Deployment(metadata=pb.ObjectMeta(name="web", namespace="default"))
    d.spec.replicas = 3
    d.status.replicas = d.status.ready_replicas = d.status.available_replicas = d.status.updated_replicas = 3
    assert deployments_restored([d]).passed
    d.status.available_replicas = 2
    result = deployments_restored([d])
    assert not result.passed and result.violations[0]["deployment"] == "default/web"


def test_a_replacement_evicted_by_a_later_batch_counts_and_needs_its_own():
    """A rolling drain: a's replacement a2 lands on a node of the next batch and is evicted in
    turn; a2 replaced a, a3 replaces a2 (the pods older than the first eviction are not
    replacements)."""
    run = three_ready()
    run.evict("a")
    run.state("a2")
    run.bind("a2", "n2")
    run.evict("a2")
    result = replacements_bound_once(run.states, run.audit)
    assert not result.passed and result.violations == [
        {"kind": "not-replaced", "owner": RS, "evicted": 2, "bound": 1}
    ]
    run.state("a3")
    run.bind("a3", "n3")
    result = replacements_bound_once(run.states, run.audit)
    assert result.passed and result.counts == {"evicted": 2, "replaced": 2}
