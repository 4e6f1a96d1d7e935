"""The DefaultTolerationSeconds admission plugin, on pod create and update (not on subresources).

Upstream (plugin/pkg/admission/defaulttolerationseconds/admission.go): a pod that does not
already tolerate the `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable`
NoExecute taints gets `Exists` tolerations for them with tolerationSeconds 300 (the
`--default-not-ready-toleration-seconds` / `--default-unreachable-toleration-seconds` flags), so
that taint-based eviction removes its pods five minutes after their node stopped reporting,
instead of at once. A toleration with the taint's key or an empty key, and effect NoExecute or
empty, counts as already tolerating (whatever its operator or seconds), as upstream checks it.
"""

from __future__ import annotations

from kse.objects.taints import NO_EXECUTE, TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE
from proto import kse_pb2 as pb

DEFAULT_NOT_READY_TOLERATION_SECONDS = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS = 300


def _tolerates_key(spec: pb.PodSpec, key: str) -> bool:
    return any(
        (t.key == key or not t.key) and (t.effect == NO_EXECUTE or not t.effect) for t in spec.tolerations
    )


def admit_default_toleration_seconds(
    pod: pb.Pod,
    not_ready_seconds: int = DEFAULT_NOT_READY_TOLERATION_SECONDS,
    unreachable_seconds: int = DEFAULT_UNREACHABLE_TOLERATION_SECONDS,
) -> None:
    """Add the default not-ready / unreachable tolerations the pod lacks (in that order)."""
    spec = pod.spec
    for key, seconds in (
        (TAINT_NODE_NOT_READY, not_ready_seconds),
        (TAINT_NODE_UNREACHABLE, unreachable_seconds),
    ):
        if not _tolerates_key(spec, key):
            spec.tolerations.append(
                pb.Toleration(key=key, operator="Exists", effect=NO_EXECUTE, toleration_seconds=seconds)
            )
