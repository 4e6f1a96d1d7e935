"""The client side of binding: post pods/binding for a pod (upstream DefaultBinder's API call,
``pkg/scheduler/framework/plugins/defaultbinder/default_binder.go``).

The Binding names the pod and carries its UID as a precondition, as upstream's does, so a pod
deleted and recreated under the same name is never bound by a decision taken for the old one. No
resourceVersion precondition: the pod's status may legitimately change between the scheduling
decision and the bind (e.g. our own PodScheduled=False write), and the API server already refuses
a pod that is bound.

Every bind carries the leader's fence token when there is one: `fence` is a callable returning
the token of the current lease term (leader election fills it in; None = unfenced). The API server
checks it in the same etcd transaction as the write. A bind it refuses as fenced
(FAILED_PRECONDITION, `FencedError`) proves that the term is over: `on_fenced(token)` is called at
once, before the error propagates, so the scheduler stops leading; such a bind is never retried.
Before sending, `is_leader()` (the elector's own-clock check, when set) must still hold, as
client-go asks of a leader before it acts: a replica that was paused past its renew deadline does
not even try (`NotLeaderError`). Fencing is what makes a late bind harmless; this only spares it.

A failed bind raises the client's typed error. DefaultBinder turns it into an Error status that
carries the error (upstream `fwk.AsStatus(err)`), and the framework keeps it through its own
wording of the status, so the scheduler reads its *type* off the Status (`Status.err`), as
upstream's handleBindingCycleError gets the `*Status`: a conflict (ABORTED: already bound, or the
UID no longer matches) or NOT_FOUND is not retried blindly, a fenced bind ends the term.
"""

from __future__ import annotations

from collections.abc import Callable

from kse import failpoints
from kse.client.clientset import Clientset
from kse.client.errors import FencedError
from proto import kse_pb2 as pb

FenceSource = Callable[[], pb.FenceToken | None]
LeaderCheck = Callable[[], bool]
# Called with the token of a write the API server refused as fenced (the term that token names is over).
FencedHook = Callable[[pb.FenceToken], None]


class NotLeaderError(Exception):
    """The bind was not sent: by its own clock this replica no longer leads."""


def new_binding(pod: pb.Pod, node_name: str) -> pb.Binding:
    """The pods/binding object for `pod` -> `node_name` (upstream's v1.Binding)."""
    return pb.Binding(
        api_version="v1",
        kind="Binding",
        metadata=pb.ObjectMeta(
            namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid
        ),
        target=pb.ObjectReference(kind="Node", api_version="v1", name=node_name),
    )


class Binder:
    """`await binder(pod, node)` posts the binding; a callable, as `Framework(binder=...)` takes."""

    def __init__(
        self,
        clientset: Clientset,
        fence: FenceSource | None = None,
        *,
        on_fenced: FencedHook | None = None,
        is_leader: LeaderCheck | None = None,
    ) -> None:
        self._cs = clientset
        self._fence = fence
        self.on_fenced = on_fenced
        self.is_leader = is_leader
        self.binds = 0
        self.failures = 0

    def set_fence(self, fence: FenceSource | None) -> None:
        self._fence = fence

    async def __call__(self, pod: pb.Pod, node_name: str) -> None:
        await self.bind(pod, node_name)

    async def bind(self, pod: pb.Pod, node_name: str) -> pb.Pod:
        """Bind and return the bound pod; raises the client's typed error on failure."""
        token = self._fence() if self._fence is not None else None
        try:
            if self.is_leader is not None and not self.is_leader():
                raise NotLeaderError(
                    f"not binding pod {pod.metadata.namespace}/{pod.metadata.name}: no longer the leader"
                )
            if failpoints.ENABLED:
                await failpoints.inject("binder/bind")
            bound = await self._cs.pods.bind(new_binding(pod, node_name), fence=token)
        except Exception as e:
            self.failures += 1
            if isinstance(e, FencedError) and token is not None and self.on_fenced is not None:
                self.on_fenced(token)
            raise
        self.binds += 1
        return bound
