"""kubectl drain's pod filters (kse.drain.filters), the cases of upstream's drain_test.go."""

from __future__ import annotations

import pytest

from kse.drain import filters
from kse.drain.filters import FilterFlags, Reason, filter_pod, lookup_in, pods_for_deletion
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb

DS_EXISTS = lookup_in({"default/ds"})


def pod(
    name: str = "p",
    *,
    owner: str | None = "ReplicaSet",
    owner_name: str = "rs",
    phase: str = "Running",
    empty_dir: bool = False,
    mirror: bool = False,
    deleted_ago: float | None = None,
) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"))
    p.spec.containers.add(name="c", image="pause")
    p.spec.node_name = "n1"
    p.status.phase = phase
    if owner is not None:
        p.metadata.owner_references.add(
            api_version="apps/v1", kind=owner, name=owner_name, uid="o", controller=True
        )
    if empty_dir:
        p.spec.volumes.add(name="scratch").empty_dir.SetInParent()
    if mirror:
        p.metadata.annotations[filters.MIRROR_POD_ANNOTATION] = "x"
    if deleted_ago is not None:
        p.metadata.deletion_timestamp = format_time(1_000_000.0 - deleted_ago)
    return p


def status(p: pb.Pod, now: float = 1_000_000.0, **flags: object) -> filters.PodDeleteStatus:
    return filter_pod(p, FilterFlags(**flags), DS_EXISTS, now)  # type: ignore[arg-type]


def test_replicated_pod_is_evicted() -> None:
    assert status(pod()) == filters.OKAY


def test_daemonset_pod_needs_ignore_daemonsets() -> None:
    ds = pod(owner="DaemonSet", owner_name="ds")
    assert status(ds) == filters.error(filters.DAEMONSET_FATAL)
    st = status(ds, ignore_daemonsets=True)
    assert (st.delete, st.reason, st.message) == (False, Reason.WARNING, "ignoring DaemonSet-managed Pods")


def test_orphaned_daemonset_pod_is_deleted_only_with_force() -> None:
    orphan = pod(owner="DaemonSet", owner_name="gone")
    assert status(orphan, ignore_daemonsets=True) == filters.error('daemonsets.apps "gone" not found')
    # Deleted under --force; its warning is lost to the later filters' OKAY, as upstream's loop keeps
    # only the last filter's status.
    assert status(orphan, force=True) == filters.OKAY


def test_finished_pods_are_deleted_whatever_they_are() -> None:
    for phase in ("Succeeded", "Failed"):
        assert status(pod(owner="DaemonSet", owner_name="ds", phase=phase)).delete
        assert status(pod(owner=None, phase=phase, empty_dir=True)) == filters.OKAY


def test_unreplicated_pod_needs_force() -> None:
    bare = pod(owner=None)
    assert status(bare) == filters.error(filters.UNMANAGED_FATAL)
    assert status(bare, force=True) == filters.warning(True, "deleting Pods that declare no controller")


def test_emptydir_needs_delete_emptydir_data() -> None:
    local = pod(empty_dir=True)
    assert status(local) == filters.error(filters.LOCAL_STORAGE_FATAL)
    # Deleted; its warning is dropped by the later filters (upstream's TODO in localStorageFilter).
    assert status(local, delete_emptydir_data=True) == filters.OKAY
    # Only the last filter's warning survives: --force's.
    both = pod(owner=None, empty_dir=True)
    assert status(both, delete_emptydir_data=True, force=True).message == filters.UNMANAGED_WARNING


def test_mirror_pod_is_skipped_silently() -> None:
    assert status(pod(owner=None, mirror=True)) == filters.SKIP


def test_skip_wait_for_delete_timeout() -> None:
    old = pod(deleted_ago=30)
    assert status(old, skip_wait_for_delete_timeout=10) == filters.SKIP
    assert status(old, skip_wait_for_delete_timeout=60) == filters.OKAY
    assert status(old) == filters.OKAY  # 0: never skip


def test_list_texts_are_kubectls() -> None:
    pods = [
        pod("a", owner="DaemonSet", owner_name="ds"),
        pod("b", owner=None),
        pod("c", owner=None),
        pod("d", empty_dir=True),
        pod("e"),
    ]
    listing = pods_for_deletion(pods, FilterFlags(), DS_EXISTS)
    assert listing.errors() == [
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/a",
        "cannot delete Pods that declare no controller (use --force to override): default/b, default/c",
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/d",
    ]
    assert [p.metadata.name for p in listing.pods()] == ["e"]
    forced = pods_for_deletion(pods, FilterFlags(force=True, ignore_daemonsets=True), DS_EXISTS)
    assert forced.errors() == [
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/d"
    ]
    assert forced.warnings() == (
        "ignoring DaemonSet-managed Pods: default/a; "
        "deleting Pods that declare no controller: default/b, default/c"
    )


@pytest.mark.parametrize(("errors", "text"), [(["a"], "a"), (["a", "b"], "[a, b]")])
def test_aggregate(errors: list[str], text: str) -> None:
    assert filters.aggregate(errors) == text
