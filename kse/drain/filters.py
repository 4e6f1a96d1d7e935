"""Which pods of a node a drain deletes, which it skips, and which stop it: kubectl's pod filters.

Pure logic over one pod and the flags, as upstream's staging/src/k8s.io/kubectl/pkg/drain/filters.go:
the filters run in kubectl's order (skip-deleted, DaemonSet, mirror, local storage, unreplicated) and
the first that says "do not delete" decides. Its status is one of

* OKAY: delete (evict) the pod;
* SKIP: leave it alone, silently (a mirror pod; a pod being deleted for longer than
  --skip-wait-for-delete-timeout);
* WARNING: delete it, or (DaemonSet pods under --ignore-daemonsets) leave it, with a warning line;
* ERROR: the drain cannot proceed (a DaemonSet pod without --ignore-daemonsets, emptyDir data without
  --delete-emptydir-data, a pod with no controller without --force).

The warning and error texts are kubectl's own, so scripts that grep kubectl's output work on ours.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kse.objects.timeutil import to_epoch
from proto import kse_pb2 as pb

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"  # corev1.MirrorPodAnnotationKey

DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "cannot delete Pods that declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"


class Reason(enum.StrEnum):
    OKAY = "Okay"
    SKIP = "Skip"
    WARNING = "Warning"
    ERROR = "Error"


@dataclass(frozen=True)
class FilterFlags:
    """The drain flags the filters read."""

    force: bool = False
    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    skip_wait_for_delete_timeout: int = 0  # seconds; 0: never skip


@dataclass(frozen=True)
class PodDeleteStatus:
    delete: bool
    reason: Reason
    message: str = ""


OKAY = PodDeleteStatus(True, Reason.OKAY)
SKIP = PodDeleteStatus(False, Reason.SKIP)


def warning(delete: bool, message: str) -> PodDeleteStatus:
    return PodDeleteStatus(delete, Reason.WARNING, message)


def error(message: str) -> PodDeleteStatus:
    return PodDeleteStatus(False, Reason.ERROR, message)


# ---------------------------------------------------------------- pod facts


def controller_of(pod: pb.Pod) -> pb.OwnerReference | None:
    """metav1.GetControllerOf: the owner reference with controller: true."""
    for ref in pod.metadata.owner_references:
        if ref.HasField("controller") and ref.controller:
            return ref
    return None


def is_finished(pod: pb.Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def has_local_storage(pod: pb.Pod) -> bool:
    return any(v.HasField("empty_dir") for v in pod.spec.volumes)


def is_mirror(pod: pb.Pod) -> bool:
    return MIRROR_POD_ANNOTATION in pod.metadata.annotations


def deleted_longer_than(pod: pb.Pod, seconds: int, now: float | None = None) -> bool:
    """shouldSkipPod: a deletionTimestamp more than `seconds` (> 0) old."""
    if seconds <= 0 or not pod.metadata.deletion_timestamp:
        return False
    try:
        since = to_epoch(pod.metadata.deletion_timestamp)
    except ValueError:
        return False
    return int((time.time() if now is None else now) - since) > seconds


# ---------------------------------------------------------------- the filters

# What a DaemonSet-owned pod's owner lookup found: None when the DaemonSet exists, else the error
# text of the failed get (`daemonsets.apps "x" not found`) and whether it was NotFound.
DaemonSetLookup = Callable[[str, str], "tuple[str, bool] | None"]


def daemonset_not_found(name: str) -> tuple[str, bool]:
    return f'daemonsets.apps "{name}" not found', True


def lookup_in(existing: Iterable[str]) -> DaemonSetLookup:
    """A DaemonSetLookup over a set of "namespace/name" keys of the DaemonSets that exist."""
    keys = set(existing)

    def lookup(namespace: str, name: str) -> tuple[str, bool] | None:
        return None if f"{namespace}/{name}" in keys else daemonset_not_found(name)

    return lookup


def _skip_deleted(pod: pb.Pod, flags: FilterFlags, _: DaemonSetLookup, now: float | None) -> PodDeleteStatus:
    return SKIP if deleted_longer_than(pod, flags.skip_wait_for_delete_timeout, now) else OKAY


def _daemonset(pod: pb.Pod, flags: FilterFlags, lookup: DaemonSetLookup, _: float | None) -> PodDeleteStatus:
    # DaemonSet pods are never deleted (the controller would put them straight back), except
    # finished ones and orphans (their DaemonSet is gone) under --force.
    ref = controller_of(pod)
    if ref is None or ref.kind != "DaemonSet":
        return OKAY
    if is_finished(pod):
        return OKAY
    failed = lookup(pod.metadata.namespace, ref.name)
    if failed is not None:
        text, not_found = failed
        return warning(True, text) if not_found and flags.force else error(text)
    if not flags.ignore_daemonsets:
        return error(DAEMONSET_FATAL)
    return warning(False, DAEMONSET_WARNING)


def _mirror(pod: pb.Pod, flags: FilterFlags, _: DaemonSetLookup, __: float | None) -> PodDeleteStatus:
    return SKIP if is_mirror(pod) else OKAY


def _local_storage(pod: pb.Pod, flags: FilterFlags, _: DaemonSetLookup, __: float | None) -> PodDeleteStatus:
    if not has_local_storage(pod) or is_finished(pod):
        return OKAY
    if not flags.delete_emptydir_data:
        return error(LOCAL_STORAGE_FATAL)
    return warning(True, LOCAL_STORAGE_WARNING)


def _unreplicated(pod: pb.Pod, flags: FilterFlags, _: DaemonSetLookup, __: float | None) -> PodDeleteStatus:
    if is_finished(pod) or controller_of(pod) is not None:
        return OKAY
    if flags.force:
        return warning(True, UNMANAGED_WARNING)
    return error(UNMANAGED_FATAL)


FILTERS = (_skip_deleted, _daemonset, _mirror, _local_storage, _unreplicated)


def filter_pod(
    pod: pb.Pod, flags: FilterFlags, lookup: DaemonSetLookup, now: float | None = None
) -> PodDeleteStatus:
    """The status of the first filter that refuses the pod, else the last filter's (upstream keeps
    only the last warning of a deleted pod: a --force warning hides an emptyDir one)."""
    status = OKAY
    for f in FILTERS:
        status = f(pod, flags, lookup, now)
        if not status.delete:
            break
    return status


# ---------------------------------------------------------------- a node's list


@dataclass(frozen=True)
class PodDelete:
    pod: pb.Pod
    status: PodDeleteStatus

    @property
    def key(self) -> str:
        return f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"


@dataclass
class PodDeleteList:
    """Every pod of a node with its status (upstream's PodDeleteList)."""

    items: list[PodDelete] = field(default_factory=list)

    def pods(self) -> list[pb.Pod]:
        """The pods to delete or evict."""
        return [i.pod for i in self.items if i.status.delete]

    def _grouped(self, reason: Reason) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for i in self.items:
            if i.status.reason == reason:
                groups.setdefault(i.status.message or "", []).append(i.key)
        return groups

    def warnings(self) -> str:
        """`ignoring DaemonSet-managed Pods: ns/a, ns/b; deleting Pods ...: ns/c` ("" if none)."""
        return "; ".join(f"{msg}: {', '.join(keys)}" for msg, keys in self._grouped(Reason.WARNING).items())

    def errors(self) -> list[str]:
        """One text per distinct error, naming its pods (`cannot delete Pods with local storage ...`)."""
        out = []
        for msg, keys in self._grouped(Reason.ERROR).items():
            msg = msg or "unexpected error"
            prefix = "" if msg.lower().startswith("cannot delete") else "cannot delete "
            out.append(f"{prefix}{msg}: {', '.join(keys)}")
        return out


def pods_for_deletion(
    pods: Iterable[pb.Pod], flags: FilterFlags, lookup: DaemonSetLookup, now: float | None = None
) -> PodDeleteList:
    return PodDeleteList([PodDelete(p, filter_pod(p, flags, lookup, now)) for p in pods])


def aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several as `[a, b]`."""
    if len(errors) == 1:
        return errors[0]
    return "[" + ", ".join(errors) + "]"


def daemonset_keys(pods: Iterable[pb.Pod]) -> set[tuple[str, str]]:
    """The (namespace, name) of every DaemonSet that controls one of `pods` (to look them up)."""
    out = set()
    for p in pods:
        ref = controller_of(p)
        if ref is not None and ref.kind == "DaemonSet":
            out.add((p.metadata.namespace, ref.name))
    return out


__all__ = [
    "DaemonSetLookup",
    "FilterFlags",
    "PodDelete",
    "PodDeleteList",
    "PodDeleteStatus",
    "Reason",
    "aggregate",
    "controller_of",
    "daemonset_keys",
    "filter_pod",
    "lookup_in",
    "pods_for_deletion",
]
