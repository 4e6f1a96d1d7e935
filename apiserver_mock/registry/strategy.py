"""Per-kind strategy hooks, as Kubernetes' `rest.RESTCreateStrategy` / `RESTUpdateStrategy`.

The registry does every verb the same way for every kind; what differs is here: defaults on create,
what an update may touch, whether a status subresource exists. Admission-like steps that need other
objects (a pod's priority from its PriorityClass) are `admit_create`, given a lookup function.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable

from google.protobuf.message import Message

from apiserver_mock.errors import invalid
from apiserver_mock.registry.defaults import DEFAULTERS
from apiserver_mock.registry.defaulttolerationseconds import admit_default_toleration_seconds
from apiserver_mock.registry.graceful import DEFAULT_TERMINATION_GRACE_PERIOD_S
from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.others import SYSTEM_PRIORITY_CLASSES
from kse.objects.kinds import BY_FIELD, Kind
from kse.objects.podaffinity import apply_match_label_keys
from kse.objects.quantity import QuantityError, parse_quantity
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

# Kubernetes' names.SimpleNameGenerator alphabet (no vowels, no confusable characters).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_SCHEDULER = "default-scheduler"
PREEMPT_LOWER = "PreemptLowerPriority"

# Look up a stored object by (kind, namespace, name): cache first, then etcd. Returns None if absent.
Lookup = Callable[[Kind, str, str], Awaitable[Message | None]]
# All objects of a kind currently in the cache.
ListAll = Callable[[Kind], list[Message]]


# names.SimpleNameGenerator: 5 random characters after the prefix, the prefix cut so the name fits 63.
_RANDOM_LENGTH = 5
_MAX_GENERATED_PREFIX = 63 - _RANDOM_LENGTH
# store.go's maxNameGenerationCreateAttempts: a generated name that exists already is drawn again.
MAX_NAME_GENERATION_ATTEMPTS = 8


def generate_name(prefix: str) -> str:
    """`prefix` plus 5 random characters, as k8s.io/apiserver/pkg/storage/names.SimpleNameGenerator."""
    base = prefix[:_MAX_GENERATED_PREFIX]
    return base + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(_RANDOM_LENGTH))


class Strategy:
    """Defaults for kinds with no special rules (Lease, Event)."""

    has_status = False

    def prepare_for_create(self, kind: Kind, msg: Message) -> None:
        meta: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        if not meta.name and meta.generate_name:
            meta.name = generate_name(meta.generate_name)
        meta.uid = str(uuid.uuid4())
        meta.creation_timestamp = now_rfc3339()
        meta.resource_version = ""
        meta.deletion_timestamp = ""
        meta.ClearField("deletion_grace_period_seconds")
        meta.generation = 1
        if not msg.api_version:  # type: ignore[attr-defined]
            msg.api_version = kind.api_version  # type: ignore[attr-defined]
        if not msg.kind:  # type: ignore[attr-defined]
            msg.kind = kind.kind  # type: ignore[attr-defined]

    async def admit_create(self, msg: Message, lookup: Lookup, list_all: ListAll) -> None:
        """Admission steps that consult other objects (none by default)."""

    def prepare_for_update(self, kind: Kind, new: Message, old: Message) -> None:
        """Carry over what a client may not change with Update (identity, timestamps, status)."""
        meta: pb.ObjectMeta = new.metadata  # type: ignore[attr-defined]
        old_meta: pb.ObjectMeta = old.metadata  # type: ignore[attr-defined]
        if not meta.uid:
            meta.uid = old_meta.uid
        meta.creation_timestamp = old_meta.creation_timestamp
        # An update can never remove or change a deletion timestamp or its grace period
        # (rest.BeforeUpdate); a graceful delete is the only way to set them.
        meta.deletion_timestamp = old_meta.deletion_timestamp
        if old_meta.HasField("deletion_grace_period_seconds"):
            meta.deletion_grace_period_seconds = old_meta.deletion_grace_period_seconds
        else:
            meta.ClearField("deletion_grace_period_seconds")
        meta.resource_version = ""
        meta.generate_name = old_meta.generate_name
        if self.has_status:
            new.status.CopyFrom(old.status)  # type: ignore[attr-defined]
        spec_changed = (
            new.HasField("spec") and new.spec != old.spec  # type: ignore[attr-defined]
            if "spec" in new.DESCRIPTOR.fields_by_name
            else new != old
        )
        meta.generation = old_meta.generation + 1 if spec_changed else old_meta.generation
        if not new.api_version:  # type: ignore[attr-defined]
            new.api_version = kind.api_version  # type: ignore[attr-defined]
        if not new.kind:  # type: ignore[attr-defined]
            new.kind = kind.kind  # type: ignore[attr-defined]

    def prepare_for_status_update(self, new_status: Message, old: Message) -> Message:
        """The object UpdateStatus stores: the stored object with only `.status` replaced."""
        out = type(old)()
        out.CopyFrom(old)
        out.status.CopyFrom(new_status)  # type: ignore[attr-defined]
        out.metadata.resource_version = ""  # type: ignore[attr-defined]
        return out


class NodeStrategy(Strategy):
    has_status = True  # nodes may set status on create (kubelet registration)


class PodStrategy(Strategy):
    has_status = True

    def prepare_for_create(self, kind: Kind, msg: Message) -> None:
        super().prepare_for_create(kind, msg)
        pod: pb.Pod = msg  # type: ignore[assignment]
        pod.status.Clear()
        pod.status.phase = "Pending"
        pod.status.qos_class = qos_class(pod.spec)
        if not pod.spec.scheduler_name:
            pod.spec.scheduler_name = DEFAULT_SCHEDULER
        if not pod.spec.HasField("termination_grace_period_seconds"):  # SetDefaults_PodSpec
            pod.spec.termination_grace_period_seconds = DEFAULT_TERMINATION_GRACE_PERIOD_S
        apply_match_label_keys(pod)  # on create only, as upstream's PrepareForCreate
        apply_scheduling_gated_condition(pod)

    def prepare_for_update(self, kind: Kind, new: Message, old: Message) -> None:
        # DefaultTolerationSeconds admits updates of pods proper too (admission.Create, Update),
        # before the strategy: a patch that replaces the tolerations gets the defaults back.
        admit_default_toleration_seconds(new)  # type: ignore[arg-type]
        super().prepare_for_update(kind, new, old)

    async def admit_create(self, msg: Message, lookup: Lookup, list_all: ListAll) -> None:
        """Priority admission: resolve spec.priority and preemptionPolicy from the PriorityClass;
        then DefaultTolerationSeconds (upstream runs it before Priority; they touch different
        fields)."""
        pod: pb.Pod = msg  # type: ignore[assignment]
        admit_default_toleration_seconds(pod)
        spec = pod.spec
        pcs = BY_FIELD["priority_class"]
        value, policy = 0, PREEMPT_LOWER
        errs = FieldErrors()
        if spec.priority_class_name:
            name = spec.priority_class_name
            if name in SYSTEM_PRIORITY_CLASSES:
                value = SYSTEM_PRIORITY_CLASSES[name]
            else:
                pc = await lookup(pcs, "", name)
                if pc is None:
                    errs.not_found("spec.priorityClassName", name)
                    errs.items[-1] += f": no PriorityClass with name {name} was found"
                    raise invalid(BY_FIELD["pod"], pod.metadata.name, errs.items)
                value = pc.value  # type: ignore[attr-defined]
                policy = pc.preemption_policy or PREEMPT_LOWER  # type: ignore[attr-defined]
        else:
            defaults = [pc for pc in list_all(pcs) if pc.global_default]  # type: ignore[attr-defined]
            if defaults:
                pc = min(defaults, key=lambda p: p.value)  # type: ignore[attr-defined]
                spec.priority_class_name = pc.metadata.name  # type: ignore[attr-defined]
                value = pc.value  # type: ignore[attr-defined]
                policy = pc.preemption_policy or PREEMPT_LOWER  # type: ignore[attr-defined]
        if spec.HasField("priority") and spec.priority != value:
            errs.forbidden(
                "spec.priority",
                f"the integer value of priority ({spec.priority}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        if spec.preemption_policy and spec.preemption_policy != policy:
            errs.forbidden(
                "spec.preemptionPolicy",
                f"the string value of PreemptionPolicy ({spec.preemption_policy}) must not be provided in "
                f"pod spec; priority admission controller computed {policy} from the given "
                "PriorityClass name",
            )
        if errs:
            raise invalid(BY_FIELD["pod"], pod.metadata.name, errs.items)
        spec.priority = value
        spec.preemption_policy = policy


class PriorityClassStrategy(Strategy):
    async def admit_create(self, msg: Message, lookup: Lookup, list_all: ListAll) -> None:
        pc: pb.PriorityClass = msg  # type: ignore[assignment]
        if not pc.global_default:
            return
        for other in list_all(BY_FIELD["priority_class"]):
            if other.global_default and other.metadata.name != pc.metadata.name:  # type: ignore[attr-defined]
                errs = FieldErrors()
                errs.forbidden(
                    "globalDefault",
                    f'PriorityClass "{other.metadata.name}" is already marked as default. '  # type: ignore[attr-defined]
                    "Only one default can exist",
                )
                raise invalid(BY_FIELD["priority_class"], pc.metadata.name, errs.items)


class DefaultedStrategy(Strategy):
    """A kind with a status subresource and SetDefaults_* defaults (workloads, Service, Namespace, PDB)."""

    has_status = True

    def __init__(self, field: str) -> None:
        self._defaults = DEFAULTERS.get(field)

    def prepare_for_create(self, kind: Kind, msg: Message) -> None:
        super().prepare_for_create(kind, msg)
        if kind.field != "namespace":  # a controller's status starts empty (PrepareForCreate)
            msg.status.Clear()  # type: ignore[attr-defined]
        if self._defaults is not None:
            self._defaults(msg)

    def prepare_for_update(self, kind: Kind, new: Message, old: Message) -> None:
        super().prepare_for_update(kind, new, old)
        if self._defaults is not None:
            self._defaults(new)


STRATEGIES: dict[str, Strategy] = {
    "pod": PodStrategy(),
    "node": NodeStrategy(),
    "lease": Strategy(),
    "event": Strategy(),
    "priority_class": PriorityClassStrategy(),
    **{
        field: DefaultedStrategy(field)
        for field in (
            "namespace",
            "service",
            "replica_set",
            "deployment",
            "daemon_set",
            "pod_disruption_budget",
        )
    },
}


SCHEDULING_GATED = "SchedulingGated"


def apply_scheduling_gated_condition(pod: pb.Pod) -> None:
    """A new pod with scheduling gates gets PodScheduled=False, reason SchedulingGated, so that
    clients (kubectl get's STATUS column) see why it waits, as kube-apiserver's pod strategy does
    on create (pkg/registry/core/pod/strategy.go, applySchedulingGatedCondition). Binding sets the
    condition True later."""
    if not pod.spec.scheduling_gates:
        return
    if any(c.type == "PodScheduled" for c in pod.status.conditions):
        return
    pod.status.conditions.add(
        type="PodScheduled",
        status="False",
        reason=SCHEDULING_GATED,
        message="Scheduling is blocked due to non-empty scheduling gates",
        last_transition_time=now_rfc3339(),
    )


def qos_class(spec: pb.PodSpec) -> str:
    """Guaranteed, Burstable or BestEffort, as `pkg/apis/core/helper/qos.GetPodQOS` computes it."""
    requests: dict[str, object] = {}
    limits: dict[str, object] = {}
    guaranteed = True
    any_set = False
    try:
        for c in (*spec.init_containers, *spec.containers):
            r = c.resources
            for name in ("cpu", "memory"):
                req_text = r.requests.get(name)
                lim_text = r.limits.get(name)
                req = parse_quantity(req_text) if req_text else None
                lim = parse_quantity(lim_text) if lim_text else None
                if (req is not None and req != 0) or (lim is not None and lim != 0):
                    any_set = True
                if req is not None:
                    requests[name] = req
                if lim is None:
                    guaranteed = False
                else:
                    limits[name] = lim
                    if req is not None and req != lim:
                        guaranteed = False
    except QuantityError:
        return ""  # validation reports the bad quantity
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed and spec.containers else "Burstable"
