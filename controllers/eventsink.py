"""Events from controllers (core/v1 Events, as client-go's record.EventRecorder writes them).

Best effort, as upstream's broadcaster: an event that cannot be written is logged and dropped; it
never fails the reconcile that recorded it. Every event carries the term's fence, so a deposed
controller-manager cannot record under the next term. Events of cluster-scoped objects (nodes)
go to the `default` namespace, as upstream's recorder puts them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kse.client.clientset import Clientset
from kse.client.errors import ApiError
from kse.objects.timeutil import format_micro_time, format_time
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"


def object_reference(kind: str, api_version: str, meta: pb.ObjectMeta) -> pb.ObjectReference:
    return pb.ObjectReference(
        kind=kind,
        api_version=api_version,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
    )


class EventSink:
    """Writes one Event per call (no aggregation: controllers here record rare transitions)."""

    def __init__(
        self,
        clientset: Clientset,
        component: str,
        fence: Callable[[], pb.FenceToken | None],
        *,
        host: str = "",
    ) -> None:
        self._cs = clientset
        self.component = component
        self._fence = fence
        self._host = host
        self.written = 0
        self.failed = 0

    async def event(self, ref: pb.ObjectReference, type_: str, reason: str, message: str) -> None:
        now = time.time()
        ns = ref.namespace or "default"
        ev = pb.Event(
            api_version="v1",
            kind="Event",
            metadata=pb.ObjectMeta(name=f"{ref.name}.{time.time_ns():x}", namespace=ns),
            involved_object=ref,
            reason=reason,
            message=message[:1024],
            source=pb.EventSource(component=self.component, host=self._host),
            first_timestamp=format_time(now),
            last_timestamp=format_time(now),
            event_time=format_micro_time(now),
            count=1,
            type=type_,
            reporting_component=self.component,
            reporting_instance=self._host or self.component,
        )
        try:
            await self._cs.events.create(ev, fence=self._fence())
            self.written += 1
        except ApiError as e:
            self.failed += 1
            log.info("event %s of %s/%s not written: %s", reason, ns, ref.name, e.message)
