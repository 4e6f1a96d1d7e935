"""A ControllerContext whose clientset never connects: for unit tests that drive a controller's
pure parts (its informer stores are filled with `Informer.replace`, no API server)."""

from __future__ import annotations

from typing import Any

from controllers.base import ControllerContext, ControllerOptions
from kse.client.clientset import Clientset
from kse.client.informer import InformerFactory


class _NoChannel:
    def current(self) -> Any:
        raise AssertionError("a unit test must not call the API server")


def offline_context(**options: Any) -> ControllerContext:
    cs = Clientset(_NoChannel())
    return ControllerContext(
        clientset=cs,
        informers=InformerFactory(cs),
        fence=lambda: None,
        identity="test",
        options=ControllerOptions(**options),
    )
