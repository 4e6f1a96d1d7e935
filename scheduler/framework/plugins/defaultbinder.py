"""DefaultBinder: binds the pod through the API (upstream plugins/defaultbinder).

A failed API call becomes an Error status that carries the client's error (upstream
`fwk.AsStatus(err)`), so the scheduler can tell a conflict or a fenced bind from the Status alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import FrameworkHandle
from scheduler.framework.types import PodInfo, Status, as_status

NAME = "DefaultBinder"


class DefaultBinder:
    def __init__(self, handle: FrameworkHandle) -> None:
        self._handle = handle

    def name(self) -> str:
        return NAME

    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        try:
            await self._handle.bind(pod_info.pod, node_name)
        except Exception as e:  # any failure of the API call becomes an Error status, as upstream
            return as_status(e)
        return None


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> DefaultBinder:
    return DefaultBinder(handle)
