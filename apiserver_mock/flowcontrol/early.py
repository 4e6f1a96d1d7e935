"""A seat taken before a request's body is read: the HTTP door's admission for writes.

Upstream's filter chain runs priority and fairness before the REST handler decodes a body, so a
shed write costs the server a header parse, not a JSON decode. kse's gate sits in
`ResourcesService.call`, after the body is decoded into a request; under a flood through the HTTP
API that left the decoding (12.5 % of the server's time in a profile) in front of the gate. The
HTTP door therefore admits a write from its URL alone (an `EarlyAdmission`, in `EARLY` for the
request's task), and `ResourcesService.call` takes that seat instead of asking again when the
method matches. The seat has one owner at a time: the door until the call takes it, the call (and
a write's shielded task) after; `release()` in the door's `finally` gives back a seat nobody took.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from apiserver_mock.flowcontrol.filter import FlowControl, Seat


@dataclass
class EarlyAdmission:
    gate: FlowControl
    method: str  # the gRPC method name the seat was admitted for ("Create", "Bind", ...)
    seat: Seat
    taken: bool = False

    def take(self, method: str) -> tuple[bool, Seat]:
        """(True, seat) for the first call of `method`, which then owns the seat; (False, None)
        for any other call (a PATCH's Get before its Update admits on its own)."""
        if self.taken or method != self.method:
            return False, None
        self.taken = True
        return True, self.seat

    def release(self) -> None:
        """Give back the seat if no call took it (the request failed before its verb ran)."""
        if not self.taken:
            self.taken = True
            self.gate.release(self.seat)


EARLY: ContextVar[EarlyAdmission | None] = ContextVar("kse_early_admission", default=None)
