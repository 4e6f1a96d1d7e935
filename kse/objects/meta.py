"""Small accessors over any served object: its metadata, its key, its resourceVersion.

Every process needs "the metadata of whatever this is" and "ns/name"; these keep that in one
place so no caller switches on the kind. Keys follow client-go's MetaNamespaceKeyFunc
("namespace/name", or just "name" for cluster-scoped objects).
"""

from __future__ import annotations

from google.protobuf.message import Message

from kse.objects.kinds import unwrap
from proto import kse_pb2 as pb

__all__ = ["key_of", "meta_of", "namespaced_name", "object_key", "resource_version_of", "uid_key"]


def meta_of(obj: pb.Object | Message) -> pb.ObjectMeta:
    """The ObjectMeta of a wrapped or typed object (a reference: changes write through)."""
    msg = unwrap(obj) if isinstance(obj, pb.Object) else obj
    return msg.metadata  # type: ignore[attr-defined,no-any-return]


def object_key(namespace: str, name: str) -> str:
    """ "namespace/name", or "name" when there is no namespace (MetaNamespaceKeyFunc)."""
    return f"{namespace}/{name}" if namespace else name


def key_of(obj: pb.Object | Message) -> str:
    """The cache key of an object: "namespace/name" or "name"."""
    meta = meta_of(obj)
    return object_key(meta.namespace, meta.name)


def uid_key(obj: pb.Object | Message) -> str:
    """An object's UID, else its key: how the scheduler's cache and binder key a pod (upstream
    GetPodKey is the UID); the key stands in for a pod that was never created and so has no UID
    (what-if's pods, tests' pods)."""
    meta = meta_of(obj)
    return meta.uid or object_key(meta.namespace, meta.name)


def namespaced_name(obj: pb.Object | Message) -> tuple[str, str]:
    """(namespace, name); namespace is "" for cluster-scoped objects."""
    meta = meta_of(obj)
    return meta.namespace, meta.name


def resource_version_of(obj: pb.Object | Message) -> int:
    """metadata.resourceVersion as an int (the etcd revision), 0 when unset."""
    rv = meta_of(obj).resource_version
    return int(rv) if rv else 0
