"""Pods waiting at Permit (upstream `pkg/scheduler/framework/runtime/waiting_pods_map.go`).

A Permit plugin that answers Wait parks the pod here, with a timeout per plugin. The binding cycle
then awaits `WaitingPod.wait()`; any other party (a plugin, the scheduler on pod deletion) may call
`allow(plugin)` or `reject(plugin, msg)` meanwhile, from the event loop or from another thread.

Upstream delivers the verdict through a channel with a buffer of one and non-blocking sends, so
the first verdict wins and later ones are dropped; `WaitingPod` keeps that rule. Each plugin's
timeout rejects the pod with upstream's message ("rejected due to timeout after waiting 10s at
plugin X", the wait printed as Go's Duration.String() by `kse.durations.format_duration`).
Timers come from an injectable factory so tests drive time themselves.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from kse.durations import format_duration
from proto import kse_pb2 as pb
from scheduler.framework.types import Code, Status


class Cancellable(Protocol):
    def cancel(self) -> None: ...


# (delay seconds, callback) -> a handle whose cancel() stops the callback.
TimerFactory = Callable[[float, Callable[[], None]], Cancellable]


def default_timers(delay: float, callback: Callable[[], None]) -> Cancellable:
    """The event loop's call_later when a loop runs in this thread, else a daemon thread timer."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        timer = threading.Timer(delay, callback)
        timer.daemon = True
        timer.start()
        return timer
    return loop.call_later(delay, callback)


class WaitingPod:
    """A pod waiting at Permit (upstream waitingPod): the plugins it still waits for, each with a
    timer, and the single verdict slot."""

    def __init__(
        self,
        pod: pb.Pod,
        plugins_max_wait: Mapping[str, float],
        timers: TimerFactory = default_timers,
    ) -> None:
        self._pod = pod
        self._lock = threading.Lock()
        self._pending: dict[str, Cancellable] = {}
        self._has_verdict = False
        self._verdict: Status | None = None
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Status | None]] | None = None
        # Holding the lock while arming the timers: a timer that fires at once must find the
        # pending map complete (upstream does the same).
        with self._lock:
            for plugin, wait in plugins_max_wait.items():
                self._pending[plugin] = timers(wait, self._timeout_callback(plugin, wait))

    def _timeout_callback(self, plugin: str, wait: float) -> Callable[[], None]:
        def fire() -> None:
            self.reject(
                plugin, f"rejected due to timeout after waiting {format_duration(wait)} at plugin {plugin}"
            )

        return fire

    def get_pod(self) -> pb.Pod:
        return self._pod

    @property
    def uid(self) -> str:
        return self._pod.metadata.uid

    def get_pending_plugins(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def allow(self, plugin: str) -> None:
        """`plugin` permits the pod; once every waited-for plugin has, the pod may bind."""
        with self._lock:
            timer = self._pending.pop(plugin, None)
            if timer is not None:
                timer.cancel()
            if self._pending:
                return
            self._deliver(None)

    def reject(self, plugin: str, msg: str) -> None:
        """The pod is unschedulable (upstream Reject(pluginName, msg))."""
        with self._lock:
            for timer in self._pending.values():
                timer.cancel()
            self._deliver(Status(Code.UNSCHEDULABLE, [msg], plugin))

    def _deliver(self, verdict: Status | None) -> None:
        # Called with the lock held. First verdict wins, as upstream's non-blocking send into a
        # channel of capacity one.
        if self._has_verdict:
            return
        self._has_verdict = True
        self._verdict = verdict
        if self._waiter is not None:
            self._wake(*self._waiter, verdict)

    @staticmethod
    def _wake(
        loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Status | None], verdict: Status | None
    ) -> None:
        def set_result() -> None:
            if not fut.done():
                fut.set_result(verdict)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            set_result()
        else:
            loop.call_soon_threadsafe(set_result)

    async def wait(self) -> Status | None:
        """The verdict: None once every plugin allowed, else the rejection."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._has_verdict:
                return self._verdict
            fut: asyncio.Future[Status | None] = loop.create_future()
            self._waiter = (loop, fut)
        try:
            return await fut
        finally:
            with self._lock:
                self._waiter = None


class WaitingPodsMap:
    """Pods waiting at Permit by UID (upstream waitingPodsMap); shared by all profiles."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, WaitingPod] = {}

    def add(self, wp: WaitingPod) -> None:
        with self._lock:
            self._pods[wp.uid] = wp

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        with self._lock:
            return iter(list(self._pods.values()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
