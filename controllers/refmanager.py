"""Owner references and claiming, as upstream's `pkg/controller/controller_ref_manager.go`.

A controller *claims* the objects it manages: those whose controller reference is its own UID and
that still match its selector are kept; owned ones that no longer match are released (the
reference removed); orphans (no controller reference) that match are adopted (the reference
added), unless the controller is being deleted. Objects controlled by someone else are never
touched. Adoption and release are updates with the object's resourceVersion as precondition, so a
concurrent change makes them fail (ConflictError) and the next sync looks again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from kse.client.errors import ConflictError, NotFoundError
from kse.objects.labels import Selector
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)


class _HasMeta(Protocol):
    @property
    def metadata(self) -> pb.ObjectMeta: ...


T = TypeVar("T", bound=_HasMeta)


def controller_ref(meta: pb.ObjectMeta) -> pb.OwnerReference | None:
    """metav1.GetControllerOf: the owner reference with controller: true."""
    for ref in meta.owner_references:
        if ref.HasField("controller") and ref.controller:
            return ref
    return None


def new_controller_ref(owner_meta: pb.ObjectMeta, api_version: str, kind: str) -> pb.OwnerReference:
    """metav1.NewControllerRef: controller and blockOwnerDeletion both true."""
    return pb.OwnerReference(
        api_version=api_version,
        kind=kind,
        name=owner_meta.name,
        uid=owner_meta.uid,
        controller=True,
        block_owner_deletion=True,
    )


Write = Callable[[T], Awaitable[T]]


async def claim(
    owner_meta: pb.ObjectMeta,
    selector: Selector,
    candidates: Sequence[T],
    ref: pb.OwnerReference,
    update: Write[T],
    copy: Callable[[T], T],
) -> list[T]:
    """The candidates `owner` controls after adopting matching orphans and releasing owned
    non-matching ones (ClaimObject). `update` writes a changed copy; a write that fails with
    NotFound or Conflict skips that object (the next sync decides again)."""
    claimed: list[T] = []
    for obj in candidates:
        meta = obj.metadata
        current = controller_ref(meta)
        matches = selector.matches(meta.labels)
        if current is not None:
            if current.uid != owner_meta.uid:
                continue  # someone else's
            if matches:
                claimed.append(obj)
                continue
            if owner_meta.deletion_timestamp:
                continue  # being deleted: ignore, as upstream
            released = copy(obj)
            kept = [r for r in released.metadata.owner_references if r.uid != owner_meta.uid]
            del released.metadata.owner_references[:]
            released.metadata.owner_references.extend(kept)
            await _try(update, released, "release", meta)
            continue
        if not matches or owner_meta.deletion_timestamp or meta.deletion_timestamp:
            continue
        adopted = copy(obj)
        adopted.metadata.owner_references.append(ref)
        result = await _try(update, adopted, "adopt", meta)
        if result is not None:
            claimed.append(result)
    return claimed


async def _try(update: Write[T], obj: T, what: str, meta: pb.ObjectMeta) -> T | None:
    try:
        return await update(obj)
    except (NotFoundError, ConflictError) as e:
        log.info("could not %s %s/%s: %s", what, meta.namespace, meta.name, e)
        return None
